"""The built-in plugins, one package per family: benchmarks, harnesses (the agents), environments, models
and analyzers. Each subclasses a contract of contracts/ and is registered by id in
declarations/registry.py, as a third party's plugin is through an entry point. A plugin may import the
contracts, the declarations and the other plugins; never the runtime's orchestration, the Dagster
layer, the command or the reporting."""
