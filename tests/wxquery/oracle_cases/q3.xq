declare variable $items := /photons/photon[coord/cel/ra >= 120.0 and coord/cel/ra <= 138.0
  and coord/cel/dec >= -49.0 and coord/cel/dec <= -40.0];
<photons>{
  let $t := $items/det_time ! xs:double(.)
  for $k in xs:integer(floor((min($t) - 20) div 10)) to xs:integer(ceiling(max($t) div 10))
  let $w := $items[det_time >= $k * 10 and det_time < $k * 10 + 20]
  where exists($w)
  let $a := avg($w/en)
  return <avg_en>{ $a }</avg_en>
}</photons>
