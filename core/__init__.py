"""Paddle LLM Studio engine. Never imports gradio; heavy imports (paddle, paddlenlp) stay inside functions."""

__version__ = "0.1.0"
