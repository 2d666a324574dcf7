"""Public face of rbench's compiled codecs (built from ext/)."""
