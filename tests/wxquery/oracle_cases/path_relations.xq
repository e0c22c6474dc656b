<diag>{
  for $p in /photons/photon
  where $p/coord/det/dx <= $p/coord/det/dy - 500 and $p/phc > $p/en + 100
    and 0.4 <= $p/en
  return <d>{ $p/coord/det }{ $p/coord[cel/ra > 130]/cel/dec }</d>
}</diag>
