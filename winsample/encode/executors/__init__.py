"""How the encode pipeline's work is spread: ``local`` (processes or threads here), ``ray`` (Ray tasks)."""
