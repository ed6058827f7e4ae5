//! STUB (H2 replaces): TLS settings that check fleet peers by pin.
