<photons>{
  for $p in /photons/photon
  where $p/coord/cel/ra >= 120.0 and $p/coord/cel/ra <= 138.0
    and $p/coord/cel/dec >= -49.0 and $p/coord/cel/dec <= -40.0
  return <vela>{ $p/coord/cel/ra }{ $p/coord/cel/dec }{ $p/phc }{ $p/en }{ $p/det_time }</vela>
}</photons>
