<out><header/>{
  for $p in /photons/photon[phc >= 150 and phc <= 152]
  return <x><pos>{ $p/coord/cel }</pos><meta><e>{ $p/en }</e><empty/></meta></x>
}<footer>done &amp; dusted</footer></out>
