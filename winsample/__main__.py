from .cli import entry

entry(prog_name="winsample")
