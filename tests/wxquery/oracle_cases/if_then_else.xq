<classified>{
  for $p in /photons/photon
  where $p/phc > 20
  return if ($p/en >= 1.0 and $p/phc >= 100) then <hard>{ $p/en }</hard>
         else if ($p/en < 0.3) then <soft>{ $p/phc }{ $p/det_time }</soft>
         else ()
}</classified>
