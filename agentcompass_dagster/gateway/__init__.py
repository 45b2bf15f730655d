"""The model gateway (issue 38): an HTTP server on a unix socket that answers the model calls of agent CLIs
running in a task's environment through the framework's model layer, one random token per attempt.

``calls`` holds what a request becomes (GatewayCall) and the Answer a token is mapped to, ``server`` the
ModelGateway, ``translate`` and ``replies`` the translation between the three API families and the OpenAI
chat format (one module a family: ``chat_completions``, ``responses_api``, ``anthropic_messages``, and
``wire`` what they share), ``refusals`` the API-shaped errors and ``admission`` the tokens and their rate
bounds. Started by the agent-CLI harnesses; may import the contracts, the store and the models.
"""
