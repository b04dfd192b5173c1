"""The log cleaner: keyed offset map (mmh3), cleanable-range selection and crash-safe segment rewrite."""
