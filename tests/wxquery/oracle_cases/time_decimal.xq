declare variable $items := /photons/photon[coord/det/dx > 3000 and coord/det/dx < 5000];
<rates>{
  let $t := $items/det_time ! xs:double(.)
  for $k in xs:integer(floor((min($t) - 2.5) div 0.5)) to xs:integer(ceiling(max($t) div 0.5))
  let $w := $items[det_time >= $k * 0.5 and det_time < $k * 0.5 + 2.5]
  where exists($w)
  let $n := count($w) let $e := sum($w/en) let $mx := max($w/en)
  where $n >= 3 and $mx < 2.3
  return <rate>{ $n }</rate>
}</rates>
