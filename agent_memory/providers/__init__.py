"""Model providers behind the interfaces of `base`; the offline ones are the default."""
