"""Supervision examples to token ids (``examples``) and LoRA supervised fine-tuning (``lora``)."""
