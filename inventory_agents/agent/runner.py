"""Where tool output comes from: the live node (run commands with timeouts) or a folder of captured outputs.

Collectors ask a Source for an output by its capture file name (`nvidia-smi-q-x.xml`, `ibstat.txt`, ...). A
LiveSource maps that name to a command line or a file on the node; a DirSource reads the file of that name from
the --from-dir folder. Either way None means "not there" (tool not installed, file absent) and the collector
skips quietly; a hang or a failing tool raises ToolError, which the report turns into a collector_errors entry.
"""

from __future__ import annotations

import contextlib
import glob
import os
import platform
import shutil
import signal
import socket
import subprocess
from typing import Dict, List, Mapping, Optional, Sequence

DEFAULT_TIMEOUT_S = 30.0
# Enough for any real tool output; a runaway tool must not exhaust the agent's memory.
MAX_OUTPUT_BYTES = 64 * 1024 * 1024

# nvidia-smi --query-gpu fields, read back by header name (so the order here does not matter).
NVIDIA_QUERY_FIELDS = (
    "index,name,serial,uuid,pci.bus_id,memory.total,vbios_version,driver_version,"
    "ecc.mode.current,ecc.errors.corrected.volatile.total,ecc.errors.uncorrected.volatile.total,"
    "ecc.errors.corrected.aggregate.total,ecc.errors.uncorrected.aggregate.total,"
    "retired_pages.single_bit_ecc.count,retired_pages.double_bit.count,retired_pages.pending,"
    "remapped_rows.correctable,remapped_rows.uncorrectable,remapped_rows.pending,remapped_rows.failure,"
    "temperature.gpu,power.draw,mig.mode.current"
)
# Drivers older than R450 reject unknown fields (remapped_rows, mig): retry with what every driver knows.
NVIDIA_QUERY_FIELDS_BASIC = (
    "index,name,serial,uuid,pci.bus_id,memory.total,vbios_version,driver_version,temperature.gpu,power.draw"
)
ROCM_SMI_ARGS = (
    "--showproductname",
    "--showserial",
    "--showuniqueid",
    "--showvbios",
    "--showdriverversion",
    "--showbus",
    "--showmeminfo",
    "vram",
    "--showtemp",
    "--showpower",
    "--showuse",
    "--json",
)
HY_SMI_DETAIL_ARGS = (
    "--showproductname",
    "--showserial",
    "--showuniqueid",
    "--showvbios",
    "--showdriverversion",
    "--showbus",
    "--showmeminfo",
    "vram",
)

# Capture name -> command lines tried in order (the first that exists and succeeds wins; several are joined
# when `join` is set). The capture names are the --from-dir file names documented in docs/agent.md.
COMMANDS: Dict[str, Sequence[Sequence[str]]] = {
    "dmidecode.txt": (("dmidecode",),),
    "lspci-vmm.txt": (("lspci", "-vmm", "-nn", "-D"),),
    "nvidia-smi-q-x.xml": (("nvidia-smi", "-q", "-x"),),
    "nvidia-smi-query-gpu.csv": (
        ("nvidia-smi", "--query-gpu=" + NVIDIA_QUERY_FIELDS, "--format=csv"),
        ("nvidia-smi", "--query-gpu=" + NVIDIA_QUERY_FIELDS_BASIC, "--format=csv"),
    ),
    "npu-smi-info.txt": (("npu-smi", "info"),),
    "npu-smi-info-m.txt": (("npu-smi", "info", "-m"),),
    "nvidia-smi-topo-m.txt": (("nvidia-smi", "topo", "-m"),),
    "nvidia-smi-nvlink-s.txt": (("nvidia-smi", "nvlink", "-s"),),
    "npu-smi-info-t-topo.txt": (("npu-smi", "info", "-t", "topo"),),
    "hy-smi-showtopo.txt": (("hy-smi", "--showtopo"),),
    "rocm-smi-showtopo.txt": (("rocm-smi", "--showtopo"),),
    "rocm-smi.json": (("rocm-smi", *ROCM_SMI_ARGS),),
    "ip-link.json": (("ip", "-j", "-d", "link", "show"), ("ip", "-j", "link", "show")),
    "ibstat.txt": (("ibstat",),),
    "lldpctl.json": (("lldpctl", "-f", "json"),),
    "lldpctl.txt": (("lldpctl", "-f", "keyvalue"),),
    "ipmitool-mc-info.txt": (("ipmitool", "mc", "info"),),
    "mlxfwmanager-query.txt": (("mlxfwmanager", "--query"),),
}
JOINED_COMMANDS: Dict[str, Sequence[Sequence[str]]] = {
    # hy-smi prints the summary table by default and the identity lines only when asked.
    "hy-smi.txt": (("hy-smi",), ("hy-smi", *HY_SMI_DETAIL_ARGS)),
}
# Files read on a live node (first existing path wins; globs allowed).
FILES: Dict[str, Sequence[str]] = {
    "os-release": ("/etc/os-release", "/usr/lib/os-release"),
    "cpuinfo": ("/proc/cpuinfo",),
    "meminfo": ("/proc/meminfo",),
    "ascend-driver-version.info": ("/usr/local/Ascend/driver/version.info",),
    "cann-version.info": (
        "/usr/local/Ascend/ascend-toolkit/latest/*/ascend_toolkit_install.info",
        "/usr/local/Ascend/ascend-toolkit/latest/version.cfg",
    ),
    "dtk-version.txt": ("/opt/dtk/.info/version", "/opt/dtk/.info/rocm_version"),
}
NPU_SMI_TYPES = ("board", "health", "ecc", "usages", "common")
# Where the tools live when the agent runs from cron or systemd with a minimal PATH (dmidecode in /usr/sbin,
# hy-smi under hyhal, rocm-smi under the DTK).
EXTRA_TOOL_DIRS = (
    "/usr/local/sbin",
    "/usr/local/bin",
    "/usr/sbin",
    "/usr/bin",
    "/sbin",
    "/bin",
    "/opt/hyhal/bin",
    "/usr/local/hyhal/bin",
    "/opt/dtk/bin",
)


class ToolError(Exception):
    """A tool hung, crashed or printed nothing useful; becomes a collector_errors entry."""


class Source:
    """Interface: output(name) -> text or None when the tool / file is absent."""

    live = False
    sys_class_net: Optional[str] = None
    sys_class_infiniband: Optional[str] = None

    def output(self, name: str) -> Optional[str]:
        raise NotImplementedError

    def hostname(self) -> Optional[str]:
        return _first_line(self.output("hostname"))

    def kernel_release(self) -> Optional[str]:
        return _first_line(self.output("uname-r"))

    def names(self) -> List[str]:
        """Capture names available without running anything (DirSource: the folder listing)."""
        return []


def _first_line(text: Optional[str]) -> Optional[str]:
    lines = (text or "").strip().splitlines()
    return lines[0].strip() or None if lines else None


class DictSource(Source):
    """Captured outputs held in memory (tests, property tests)."""

    def __init__(self, files: Mapping[str, str]) -> None:
        self.files = dict(files)

    def output(self, name: str) -> Optional[str]:
        return self.files.get(name)

    def names(self) -> List[str]:
        return sorted(self.files)


class DirSource(Source):
    """--from-dir: one file per command, named as in COMMANDS / FILES (any subset)."""

    def __init__(self, directory: str) -> None:
        self.directory = directory
        sys_net = os.path.join(directory, "sys-class-net")
        self.sys_class_net = sys_net if os.path.isdir(sys_net) else None
        sys_ib = os.path.join(directory, "sys-class-infiniband")
        self.sys_class_infiniband = sys_ib if os.path.isdir(sys_ib) else None

    def output(self, name: str) -> Optional[str]:
        path = os.path.join(self.directory, name)
        if not os.path.isfile(path):
            return None
        try:
            with open(path, "rb") as handle:
                data = handle.read(MAX_OUTPUT_BYTES)
        except OSError as exc:
            raise ToolError("cannot read {}: {}".format(path, exc)) from exc
        # Captures are text; undecodable bytes must not stop the whole report.
        return data.decode("utf-8", errors="replace")

    def names(self) -> List[str]:
        try:
            return sorted(os.listdir(self.directory))
        except OSError:
            return []


def run_command(argv: Sequence[str], timeout: float, env: Optional[Dict[str, str]] = None) -> Optional[str]:
    """Run argv; None when the program is not installed; ToolError on timeout or a failure without output.

    The child gets its own process group so a hanging tool and anything it spawned are killed together
    (subprocess.run only kills the direct child and then waits on pipes a grandchild may still hold).
    """
    path = (env or os.environ).get("PATH", os.defpath)
    if shutil.which(argv[0], path=path) is None:
        return None
    try:
        proc = subprocess.Popen(
            list(argv),
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            env=env,
            start_new_session=True,
        )
    except OSError as exc:
        raise ToolError("{}: {}".format(argv[0], exc)) from exc
    try:
        stdout, stderr = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        _kill_group(proc)
        raise ToolError("{} timed out after {:g}s and was killed".format(" ".join(argv[:3]), timeout)) from None
    text = stdout[:MAX_OUTPUT_BYTES].decode("utf-8", errors="replace")
    if proc.returncode != 0 and not text.strip():
        message = stderr.decode("utf-8", errors="replace").strip().splitlines()
        raise ToolError(
            "{} exited {}: {}".format(" ".join(argv[:3]), proc.returncode, message[-1] if message else "no output")
        )
    return text


def _kill_group(proc: "subprocess.Popen[bytes]") -> None:
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        proc.kill()
    with contextlib.suppress(subprocess.TimeoutExpired):
        proc.communicate(timeout=5)


class LiveSource(Source):
    """Runs the tools on this node."""

    live = True
    sys_class_net = "/sys/class/net"
    sys_class_infiniband = "/sys/class/infiniband"

    def __init__(self, timeout: float = DEFAULT_TIMEOUT_S, path: Optional[str] = None) -> None:
        self.timeout = timeout
        self.env = dict(os.environ)
        if path is None:
            dirs = [d for d in self.env.get("PATH", "").split(os.pathsep) if d]
            path = os.pathsep.join(dirs + [d for d in EXTRA_TOOL_DIRS if d not in dirs])
        self.env["PATH"] = path
        # Parsers rely on English, dot-decimal output.
        self.env["LC_ALL"] = "C"
        self._cache: Dict[str, Optional[str]] = {}

    def run(self, argv: Sequence[str]) -> Optional[str]:
        return run_command(argv, self.timeout, self.env)

    def output(self, name: str) -> Optional[str]:
        if name not in self._cache:
            self._cache[name] = self._produce(name)
        return self._cache[name]

    def _produce(self, name: str) -> Optional[str]:
        if name == "hostname":
            return socket.gethostname()
        if name == "uname-r":
            return platform.release()
        if name in FILES:
            return _read_first(FILES[name])
        if name in JOINED_COMMANDS:
            parts = [self.run(argv) for argv in JOINED_COMMANDS[name]]
            found = [part for part in parts if part is not None]
            return "\n".join(found) if found else None
        if name in COMMANDS:
            return self._first_success(COMMANDS[name])
        npu = _npu_smi_argv(name)
        if npu is not None:
            return self.run(npu)
        ethtool = _ethtool_argv(name)
        if ethtool is not None:
            return self.run(ethtool)
        return None

    def _first_success(self, candidates: Sequence[Sequence[str]]) -> Optional[str]:
        error: Optional[ToolError] = None
        for argv in candidates:
            try:
                text = self.run(argv)
            except ToolError as exc:
                if "timed out" in str(exc):
                    raise  # a hanging tool will hang again with other flags
                error = exc
                continue
            if text is None:
                return None
            return text
        if error is not None:
            raise error
        return None


def _npu_smi_argv(name: str) -> Optional[List[str]]:
    """npu-smi-<type>-<N>.txt -> npu-smi info -t <type> -i <N>."""
    if not (name.startswith("npu-smi-") and name.endswith(".txt")):
        return None
    parts = name[len("npu-smi-") : -len(".txt")].split("-")
    if len(parts) != 2 or parts[0] not in NPU_SMI_TYPES or not parts[1].isdigit():
        return None
    return ["npu-smi", "info", "-t", parts[0], "-i", parts[1]]


def _ethtool_argv(name: str) -> Optional[List[str]]:
    """ethtool-i-<if>.txt -> ethtool -i <if> (interface names as the kernel allows them, nothing else)."""
    if not (name.startswith("ethtool-i-") and name.endswith(".txt")):
        return None
    interface = name[len("ethtool-i-") : -len(".txt")]
    if not interface or len(interface) > 15 or interface.startswith("-") or "/" in interface:
        return None
    return ["ethtool", "-i", interface]


def _read_first(patterns: Sequence[str]) -> Optional[str]:
    for pattern in patterns:
        for path in sorted(glob.glob(pattern)):
            try:
                with open(path, encoding="utf-8", errors="replace") as handle:
                    return handle.read(MAX_OUTPUT_BYTES)
            except OSError:
                continue
    return None


def read_sys_file(root: Optional[str], *parts: str) -> Optional[str]:
    """A /sys/class/net attribute (or its --from-dir mirror under sys-class-net/); None when unreadable."""
    if not root:
        return None
    try:
        with open(os.path.join(root, *parts), encoding="utf-8", errors="replace") as handle:
            return handle.read().strip()
    except OSError:
        # Reading `speed` of a down link raises EINVAL: that is "unknown", not an error.
        return None


def sys_link_target(root: Optional[str], *parts: str) -> Optional[str]:
    """Basename of a symlink such as /sys/class/net/eth0/device -> ../../../0000:3b:00.0."""
    if not root:
        return None
    path = os.path.join(root, *parts)
    try:
        return os.path.basename(os.path.realpath(path)) if os.path.exists(path) else None
    except OSError:
        return None
