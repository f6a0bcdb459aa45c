"""Executor adapters: run driver install/rollback commands on nodes (SSH, dry run, fake)."""

from .base import CommandExecutor, CommandResult, ExecTarget
from .commands import TemplateError, command_render
from .registry import executor_get, override

__all__ = [
    "CommandExecutor",
    "CommandResult",
    "ExecTarget",
    "TemplateError",
    "command_render",
    "executor_get",
    "override",
]
