"""The command line: the click group, and the one place exceptions become exit codes.

Commands are declared in ``pin`` (lock, install, build), ``machine`` (export, diff, probe,
nccl-tests, explain), ``check`` (verify, preflight, doctor), ``fixing`` (fix) and ``job``
(collect), with shared
options in ``options``; each declaration calls its ``envtool/commands/<name>.run``.
"""

from __future__ import annotations

import os
import signal
import sys
from collections.abc import Callable, Sequence

import click

from envtool import __version__
from envtool.errors import (
    EXIT_BAD_INPUT,
    EXIT_INTERNAL,
    EXIT_INTERRUPTED,
    EXIT_OK,
    EXIT_TERMINATED,
    EnvtoolError,
    Terminated,
)


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, "--version", prog_name="envtool")
def cli() -> None:
    """Pin, build, probe and verify PyTorch DDP environments across GPU nodes."""


def _verbosity(level: int) -> Callable[[click.Context, click.Parameter, bool], None]:
    def given(ctx: click.Context, param: click.Parameter, value: bool) -> None:
        if value:
            from envtool.report.console import set_verbosity

            set_verbosity(level)

    return given


def verbosity_options() -> list[click.Parameter]:
    """``-q/--quiet`` and ``-v/--verbose``, taken before or after any command's name."""
    from envtool.report.console import QUIET, VERBOSE

    return [
        click.Option(["-q", "--quiet"], is_flag=True, expose_value=False,
                     callback=_verbosity(QUIET),
                     help="Errors and the report only: no progress, no notices."),
        click.Option(["-v", "--verbose"], is_flag=True, expose_value=False,
                     callback=_verbosity(VERBOSE),
                     help="Also each command envtool starts and each host's answer (stderr)."),
    ]  # fmt: skip


def _register() -> None:
    """Add every command to the group (their modules only declare; commands/ runs them),
    each with the verbosity options."""
    from envtool.cli import check, fixing, history, job, machine, pin

    if not cli.commands:
        cli.params.extend(verbosity_options())
        for command in (
            *pin.COMMANDS,
            *machine.COMMANDS,
            *check.COMMANDS,
            *fixing.COMMANDS,
            *job.COMMANDS,
            *history.COMMANDS,
        ):
            command.params.extend(verbosity_options())
            cli.add_command(command)


def _fail(message: str, code: int) -> int:
    from envtool.report.console import error

    error(message)  # one line, whatever the message holds (report/text.py)
    return code


def _interrupted(exc: BaseException | None) -> int:
    if isinstance(exc, Terminated):
        return _fail("terminated (SIGTERM)", EXIT_TERMINATED)
    return _fail("interrupted", EXIT_INTERRUPTED)


def _raise_terminated(signum: int, frame: object) -> None:
    signal.signal(signal.SIGTERM, signal.SIG_IGN)  # one is enough: cleanup must not be cut short
    raise Terminated()


def main(argv: Sequence[str] | None = None) -> int:
    """Run the CLI and return its exit code; the only place exceptions become exit codes."""
    _register()
    from envtool.report.console import NORMAL, set_verbosity

    set_verbosity(NORMAL)  # -q / -v, when given, set it again while the options are read
    try:
        rv = cli.main(
            args=list(argv) if argv is not None else None,
            prog_name="envtool",
            standalone_mode=False,
        )
    except click.exceptions.Exit as exc:
        return int(exc.exit_code)
    except click.ClickException as exc:
        exc.show()
        return EXIT_BAD_INPUT if isinstance(exc, click.UsageError) else exc.exit_code
    except click.exceptions.Abort as exc:  # click turns a KeyboardInterrupt into Abort
        return _interrupted(exc.__context__)
    except EnvtoolError as exc:
        return _fail(str(exc), exc.exit_code)
    except KeyboardInterrupt as exc:
        return _interrupted(exc)
    except Exception as exc:  # the last resort: one line, a traceback only on request
        if os.environ.get("ENVTOOL_DEBUG", "") not in ("", "0"):
            import traceback

            traceback.print_exc()  # the same exit code with or without the traceback
        return _fail(
            f"internal error: {type(exc).__name__}: {exc} (ENVTOOL_DEBUG=1 for a traceback)",
            EXIT_INTERNAL,
        )
    return int(rv) if isinstance(rv, int) else EXIT_OK


def entry() -> None:
    """Console-script entry point; SIGTERM stops envtool as Ctrl-C does (cleanup, exit 143)."""
    signal.signal(signal.SIGTERM, _raise_terminated)
    code = main()
    if "rattler" in sys.modules:
        # rattler's runtime threads can abort the interpreter while it finalizes (seen about
        # once in 40 runs): flush and leave without finalizing once the work is done.
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(code)
    sys.exit(code)
