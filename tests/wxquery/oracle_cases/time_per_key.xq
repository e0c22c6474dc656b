(: |det_time diff 20 step 10 by phc|: window k of each phc value holds that channel's items with
   det_time in [10k, 10k + 20); windows come out by k, then by key (codepoints, no key first). :)
declare variable $items := /photons/photon;
<busy_channels>{
  let $t := $items/det_time ! xs:double(.)
  for $k in xs:integer(floor((min($t) - 20) div 10)) to xs:integer(ceiling(max($t) div 10))
  for $p in $items[det_time >= $k * 10 and det_time < $k * 10 + 20]
  let $key := ($p/phc)[1]/string()
  group by $k, $key
  let $w := $p
  let $n := count($w)
  let $m := max($w/en)
  where $n >= 2 and $w[1]/phc > 100
  order by $k, $key empty least collation "http://www.w3.org/2005/xpath-functions/collation/codepoint"
  return <w>{ $w[1]/phc }<n>{ $n }</n><m>{ $m }</m></w>
}</busy_channels>
