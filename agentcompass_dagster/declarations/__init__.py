"""The declarations: what a sweep (sweep.py) and the request the runtime executes (request.py) are, read
from YAML and checked; where a name declared in a sweep resolves (references.py); the plugins a name
stands for (registry.py); a sweep's harness x model contestants and its Dagster deployment. Errors are one
line naming the file, the field and the value. May import the contracts, and the plugins only through the
registry (lazily, when a declaration names one); never the runtime, the durable layer, the Dagster layer,
the command or the reporting."""
