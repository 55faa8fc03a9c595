"""The Textual operator console for hardware campaigns (implements `operator.Operator`)."""

from .app import ConsoleOperator, OperatorConsole, run_console

__all__ = ["ConsoleOperator", "OperatorConsole", "run_console"]
