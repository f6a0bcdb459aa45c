"""gpuops node-side inventory agent.

Runs on GPU nodes as they are: pure standard library, no Django, Python 3.8+. It runs the vendor tools
(nvidia-smi, npu-smi, hy-smi / rocm-smi, dmidecode, lspci, ip, ibstat, lldpctl), turns their output into one
versioned JSON report (see inventory_agents/schema/agent-report-v1.json) and POSTs it to the server.
"""

AGENT_VERSION = "1.1.0"
SCHEMA_ID = "gpuops.agent-report/1"
