"""The supervision variants (docs/design.md §3), one registered object each (``factory.variants.registry``):
what each keeps of a trajectory (``factory.variants.kept``), the chat-format SFT set of a round
(``factory.variants.sets``) and the published sets (``factory.variants.publish``)."""
