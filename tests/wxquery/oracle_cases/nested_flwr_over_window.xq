<w>{
  let $items := /photons/photon
  let $t := $items/det_time ! xs:double(.)
  for $k in xs:integer(floor((min($t) - 30) div 30)) to xs:integer(ceiling(max($t) div 30))
  let $w := $items[det_time >= $k * 30 and det_time < $k * 30 + 30]
  where exists($w)
  return <win>{ for $x in $w where $x/en >= 2.0 return $x/en }</win>
}</w>
