"""How Dagster runs a sweep's job (the sweep's ``dagster:`` field): the executor of its steps and how its
missing partitions are split into runs."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import Field, model_validator

from agentcompass_dagster.contracts.declarations import Declaration


class DockerConfig(Declaration):
    """Step containers (dagster-docker's docker_executor). The image holds this project and what the
    sweep's plugins need; the results directory, the resources and (for a SQLite instance) DAGSTER_HOME
    must be mounted at the same paths, so that what a step writes is on the host."""

    image: str = Field(min_length=1)
    network: str | None = None
    env_vars: list[str] = Field(default_factory=list)
    # Passed to Docker's containers.run: volumes, user, mem_limit, ...
    container_kwargs: dict[str, Any] = Field(default_factory=dict)


class K8sConfig(Declaration):
    """Step pods (dagster-k8s's k8s_job_executor). The image holds this project; the results directory
    and the sweep files live on a volume every pod mounts at the same path, and the instance is
    PostgreSQL (AGENTCOMPASS_DAGSTER_PG_URL), since pods share no DAGSTER_HOME."""

    image: str = Field(min_length=1)
    namespace: str = "default"
    env_vars: list[str] = Field(default_factory=list)
    # Kubernetes volumes and volume mounts, as in k8s_job_executor: {name, persistentVolumeClaim: ...}
    # and {name, mount_path}.
    volumes: list[dict[str, Any]] = Field(default_factory=list)
    volume_mounts: list[dict[str, Any]] = Field(default_factory=list)
    service_account_name: str | None = None
    load_incluster_config: bool = True
    kubeconfig_file: str | None = None


class DagsterDeployment(Declaration):
    """How Dagster runs the sweep's job.

    ``executor``: the steps of a run in its run worker, one after the other (``in_process``), each in a
    process of its own (``multiprocess``), each in a container (``docker``, configured under ``docker``)
    or each in a Kubernetes pod (``k8s``, configured under ``k8s``). Missing partitions are split into
    runs of at most ``max_partitions_per_run`` (model, task) pairs, of which at most
    ``max_concurrent_runs`` evaluate at once, whoever launched them (a Dagster pool)."""

    executor: Literal["in_process", "multiprocess", "docker", "k8s"] = "in_process"
    docker: DockerConfig | None = None
    k8s: K8sConfig | None = None
    max_partitions_per_run: int | None = Field(default=None, ge=1)
    max_concurrent_runs: int = Field(default=1, ge=1, le=1000)

    @model_validator(mode="after")
    def _executor_needs_its_settings(self) -> DagsterDeployment:
        if self.executor in ("docker", "k8s") and getattr(self, self.executor) is None:
            raise ValueError(
                f"executor {self.executor!r} needs {self.executor}: {{image: ...}}, an image that holds this project"
            )
        return self
