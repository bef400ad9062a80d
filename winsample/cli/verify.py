"""``winsample verify``: checks with exit codes CI can trust (0 sound, 1 a check failed, 2 could not run)."""

from __future__ import annotations

import click

from ..errors import WinsampleError
from . import render
from .common import EXIT_CODE_KEY, bare_dtype_option, emit, emit_json, json_option, named, progress, quiet_option, say, use_color
from .main import main


class _VerifyCommand(click.Command):
    """verify's help lists the checks from their registry (``winsample.verify.registry``), read
    only when the help is shown, so that the CLI starts without importing the checks."""

    def format_help_text(self, ctx, formatter):
        from ..verify.registry import help_lines

        template = self.help
        if template and "{checks}" in template:  # filled at each display: a check registered since shows too
            self.help = template.replace("{checks}", "\n    ".join("  " + line for line in help_lines()))
        try:
            super().format_help_text(ctx, formatter)
        finally:
            self.help = template


@main.command(cls=_VerifyCommand)
@click.argument("path", type=click.Path(path_type=str), required=False)
@click.option("--plan", "plans", multiple=True, type=click.Path(path_type=str), metavar="PLAN.npy",
              help="A window plan (or a mixture, from mix) to check against its token file (repeatable).")
@click.option("-T", "--context", "T", type=click.IntRange(min=1), default=None,
              help="Model input length: min_length checks N ≥ T + 1, context_length that each plan's windows are T"
                   " tokens. Default: from each plan's sidecar.")
@click.option("--min-coverage", type=click.FloatRange(0, 1), default=0.95, show_default=True,
              help="Least share of tokens inside at least one window.")  # the article's threshold
@click.option("--max-leakage", type=click.FloatRange(0, 1), default=0.01, show_default=True,
              help="Most share of val's 32-token shingles also found in train.")
@click.option("--show", type=click.IntRange(min=0), default=5, show_default=True,
              help="Decode and print this many windows, for a person to read before training.")
@click.option("--meta", "meta_path", type=click.Path(path_type=str), default=None,
              help="meta.json to use for a single .bin, or for llm.c shards named on their own (default: the one beside"
              " the .bin; the data folder's, above the shards' llmc/ folder).")
@click.option("--encoding", callback=named, default=None, help="Tokenizer when there is no meta.json: a tiktoken name, or a tokenizer file or folder (tokenizer.json, SentencePiece, .tiktoken) [default gpt2].")
@bare_dtype_option
@click.option("--retokenize-sample", type=click.IntRange(min=0), default=64, show_default=True,
              help="Documents the retokenize check decodes and encodes again with the reference tokenizer;"
                   " their ids must be its ids. 0 skips the check.")
@click.option("--retokenize-bytes", type=click.IntRange(min=1), default=512_000, show_default=True,
              help="At most this many bytes of the sampled documents' text are encoded again (a longer"
                   " document is checked on a window of it).")
@click.option("--strict", is_flag=True, help="Warnings fail too (exit 1).")
@click.option("--plot", "plot_png", type=click.Path(dir_okay=False, path_type=str), metavar="PNG", default=None,
              help="Also draw the first --plan's coverage picture into PNG (needs winsample[plot]).")
@quiet_option
@json_option
@click.pass_context
def verify(ctx, path, plans, T, min_coverage, max_leakage, show, meta_path, encoding, dtype, retokenize_sample, retokenize_bytes, strict, plot_png, quiet, as_json):
    """Check token files and window plans; exit 0 if sound, 1 if a check fails, 2 if it cannot run.

    PATH is a data folder (train.bin, val.bin, meta.json, document indexes) or one .bin. PATH a
    plan (PLAN.npy), or no PATH: the plans alone, each against the token file its sidecar names
    (for a mixture from mix: the mixture, then each source plan against its own token file).

    \b
    Checks (their names in the report and --json):
    {checks}
    \b
      winsample verify data/ --plan train.plan.npy
      winsample verify data/ --plan train.plan.npy --json -q > verify.json   # in CI
      winsample verify data/ --plan train.plan.npy --plot coverage.png
      winsample verify mix.plan.npy                   # a mixture and every source plan
    """
    from ..verify import verify as run_verify
    from ..verify.run import is_plan_path, plan_of

    if path is None and not plans:
        raise click.UsageError("name a data folder, a token file or a plan (PATH, or --plan PLAN.npy)", ctx=ctx)
    if plot_png:
        drawn_plan = plan_of(path) if path is not None and is_plan_path(path) else plans[0] if plans else None
        if drawn_plan is None:
            raise click.UsageError("--plot draws a window plan: add --plan PLAN.npy", ctx=ctx)
        from ..plot import refuse_mixture, require_matplotlib

        require_matplotlib()  # fail before the checks, not after
        refuse_mixture(drawn_plan)

    with progress(quiet, unit="B", unit_scale=True, desc="verify") as bar:
        report = run_verify(
            path, plans, T=T, min_coverage=min_coverage, max_leakage=max_leakage, show=show,
            meta_path=meta_path, encoding=encoding, dtype=dtype, progress=bar.update, writes=[plot_png] if plot_png else [],
            retokenize_sample=retokenize_sample,
            retokenize_bytes=retokenize_bytes,
        )
    code = report.exit_code(strict)
    drawn, plot_error = None, None
    if plot_png:
        from ..plot import plan_bin, plot_plan

        try:
            with progress(quiet, unit="tok", unit_scale=True, desc="plot") as bar:
                drawn = plot_plan(plot_png, plan_bin(path, drawn_plan), drawn_plan, progress=bar.update)
        except WinsampleError as e:  # the report still prints; a broken plan may not be drawable
            plot_error = e
            code = code or e.exit_code
    ctx.meta[EXIT_CODE_KEY] = code
    if as_json:
        doc = report.to_dict(strict)
        if plot_png:
            doc["plot"] = drawn if drawn else {"png": plot_png, "error": str(plot_error)}
        emit_json(doc)
    else:
        text = render.verify_text(report, strict, quiet, use_color())
        if text:
            emit(text)
    if plot_error is not None:
        click.echo(f"error: --plot {plot_png}: {plot_error}", err=True)
    elif drawn:
        say(quiet, f"coverage picture of {drawn_plan} → {plot_png}")
    if code:
        ctx.exit(code)
