<photons>{
  for $p in /photons/photon
  where $p/en >= 1.3 and $p/coord/cel/ra >= 130.5 and $p/coord/cel/ra <= 135.5
    and $p/coord/cel/dec >= -48.0 and $p/coord/cel/dec <= -45.0
  return <rxj>{ $p/coord/cel/ra }{ $p/coord/cel/dec }{ $p/en }{ $p/det_time }</rxj>
}</photons>
