-- probe.lua: the cheapest script round trip (readiness probe, benchmark ceiling).
return 1
