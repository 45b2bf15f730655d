"""The base of every declaration read from YAML (config.py, deployment.py)."""

from pydantic import BaseModel, ConfigDict


class Declaration(BaseModel):
    # A typo is an error, not an ignored setting.
    model_config = ConfigDict(extra="forbid")
