"""zh/en text of newer features, one module a feature (each a ``TEXT`` dict shaped like
studio.locales.TEXT); studio.locales merges every module here into its TEXT at import."""
