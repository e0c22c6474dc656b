<bursts>{
  for sliding window $w in /photons/photon[en > 1.9]
    start at $s when ($s - 1) mod 2 eq 0 only end at $e when $e - $s + 1 eq 4
  return <burst>{ $w }</burst>
}</bursts>
