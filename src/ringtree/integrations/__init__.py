"""ringtree inside other frameworks: a DDP communication hook (:mod:`.ddp`)."""
