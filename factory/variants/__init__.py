"""The three supervision variants (docs/design.md §3): what each keeps of a trajectory
(``factory.variants.kept``) and the chat-format SFT set of a round (``factory.variants.sets``)."""
