declare variable $items := /photons/photon[coord/cel/ra >= 120.0 and coord/cel/ra <= 138.0
  and coord/cel/dec >= -49.0 and coord/cel/dec <= -40.0];
<photons>{
  let $t := $items/det_time ! xs:double(.)
  for $k in xs:integer(floor((min($t) - 60) div 40)) to xs:integer(ceiling(max($t) div 40))
  let $w := $items[det_time >= $k * 40 and det_time < $k * 40 + 60]
  where exists($w)
  let $a := avg($w/en)
  where $a >= 1.3
  return <avg_en>{ $a }</avg_en>
}</photons>
