"""The operator console for hardware campaigns (implements `operator.Operator`).

`run_with_console(protocol, session)` runs the Textual console on the main thread and
`session(operator)` (e.g. `lambda op: run_campaign(opened, op)`) on a worker thread.
`PromptOperator` (`console.prompt`) is the plain-terminal alternative (`--no-console`).
"""

from orchestrator.run.console.app import ConsoleOperator, OperatorConsole, run_console, run_with_console

__all__ = ["ConsoleOperator", "OperatorConsole", "run_console", "run_with_console"]
