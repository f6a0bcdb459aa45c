"""OS-install adapters: hand a node to the PXE/OS-install system (webhook + callback, fake)."""

from .base import JOB_STATUSES, OsInstaller, OsInstallJob, OsInstallRequest
from .registry import os_installer_get, override

__all__ = ["JOB_STATUSES", "OsInstallJob", "OsInstallRequest", "OsInstaller", "os_installer_get", "override"]
