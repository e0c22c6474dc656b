declare variable $items := /photons/photon[en >= 0.3];
<photons>{
  let $t := $items/det_time ! xs:double(.)
  for $k in xs:integer(floor((min($t) - 45) div 15)) to xs:integer(ceiling(max($t) div 15))
  let $w := $items[det_time >= $k * 15 and det_time < $k * 15 + 45]
  where exists($w)
  let $lo := min($w/en) let $hi := max($w/en) let $a := avg($w/en)
  where $a >= 0.9 and $hi <= $lo + 7.5
  return <win><avg>{ $a }</avg><spread>{ $lo }{ $hi }</spread></win>
}</photons>
