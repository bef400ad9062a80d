"""Bad input in a run: a text file checked before it is read for good (``--on-bad-input skip``),
and every bad input found once a run has met one (``--on-bad-input fail``)."""

from __future__ import annotations

from ..errors import DataError, WinsampleError
from .decoding import BadInput, Reading, many_bad
from .inputs import Reader, Source, jsonl_docs, text_chunks


def first_problem(src: Source, reading: Reading) -> BadInput | None:
    """The first bad input of text file ``src`` read through as ``reading`` reads (nothing kept
    or counted: the run reads it again if it is good), or None."""
    probe = Reading(reading.errors, reading.encoding, hint=reading.hint)
    reader = Reader(src, None, probe.replaced)
    try:
        for _ in text_chunks(reader, probe.errors, probe):
            pass
    except BadInput as e:
        return e
    finally:
        reader.abort()
    return None


def every_bad(sources: list[Source], first: BadInput, reading: Reading, text_field: str = "text",
              id_field: str | None = None, start: int | None = None) -> DataError:
    """The error of a run that met ``first``: the inputs from ``first``'s on (``start``: from that
    input on, a run in parts whose earlier parts may hold bad input too) are read through (text
    and JSONL; stdin once only) and every bad one found goes into it (``decoding.many_bad``)."""
    if reading.skip:  # what skip could not leave out: text on stdin, already being encoded when found bad
        why = "standard input is read once, so --on-bad-input skip cannot leave it out: save it to a file and encode that"
        return BadInput(f"{first}; {why}", first.src, first.byte, first.line)
    at = start if start is not None else next((k for k, s in enumerate(sources) if s is first.src), None)
    if at is None:
        return first
    probe = Reading(reading.errors, reading.encoding, skip=True, hint=reading.hint)
    if first.src.path is None:  # stdin cannot be read again: what it held is known up to `first`
        probe.left_out(first)
        at += 1
    for src in sources[at:]:
        try:
            if src.kind == "text":
                bad = first_problem(src, probe)
                if bad is not None:
                    probe.left_out(bad)
            elif src.kind == "parquet":
                from .parquet import parquet_docs  # pyarrow only for a Parquet input

                for _ in parquet_docs(src, text_field, None, id_field, probe):
                    pass
            elif src.kind == "jsonl":
                reader = Reader(src, None, probe.replaced)
                try:
                    for _ in jsonl_docs(reader, probe.errors, text_field, id_field, 0, probe):
                        pass
                finally:
                    reader.abort()
        except WinsampleError:  # cannot be read at all (gone, unreadable): the run's error is already known
            continue
    total = probe.skipped_inputs + probe.skipped_records
    if total == 1 and start is not None:  # the one bad input, as reading the inputs in order meets it
        return BadInput(probe.bad[0]["error"], first.src, probe.bad[0]["byte"], probe.bad[0]["line"])
    if total <= 1:
        return first
    return many_bad([b["error"] for b in probe.bad], total, probe.hint)
