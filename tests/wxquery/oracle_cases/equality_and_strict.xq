<eq>{
  for $p in /photons/photon[phc = 16]
  where $p/en > 0.1 and $p/coord/det/dx < 4500
  return <hit>{ $p/det_time }</hit>
}</eq>
