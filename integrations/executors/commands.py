"""Rendering a package's command template ({version}, {previous_version}, ...) into a shell command."""

from __future__ import annotations

import re
import shlex

_PLACEHOLDER = re.compile(r"\{([a-z_]+)\}")


class TemplateError(ValueError):
    """A template names a placeholder we do not fill, or is empty."""


def command_render(template: str, **values: str) -> str:
    """Fill `{name}` placeholders with shell-quoted values.

    Only the placeholders given are allowed (an unknown one is a mistake in the package row, not something to
    pass to a shell), and every value is quoted, so a version string can never inject a command.
    """
    if not template.strip():
        raise TemplateError("the command template is empty")
    unknown = sorted({m.group(1) for m in _PLACEHOLDER.finditer(template)} - set(values))
    if unknown:
        raise TemplateError(f"unknown placeholder(s) {', '.join('{' + u + '}' for u in unknown)} in {template!r}")
    return _PLACEHOLDER.sub(lambda m: shlex.quote(str(values[m.group(1)])), template)


__all__ = ["TemplateError", "command_render"]
