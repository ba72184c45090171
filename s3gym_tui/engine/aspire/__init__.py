"""ASPIRE (issue 25): self-directed improvement from a vague goal, judged on hidden suites.

goals (the goal set and its hidden suites), budget, tools (the agent's managed interface), operators
(the agent: a litellm model with tool calling, or a scripted plan), hidden (strict evaluation on the
controller side), controller (the loop, protocols, retention, resume). Free of Textual.
"""
