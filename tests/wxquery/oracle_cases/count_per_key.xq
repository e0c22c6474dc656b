(: |count 3 by phc|: one count window sequence per phc value (its string), each window closed
   by its channel's third item; the windows come out in the order of the items that close them.
   $w/phc, the key, is $w[1]/phc. (The window clause is nested: Saxon-HE 12 gives one window
   for a window clause straight after group by.) :)
<per_channel>{
  for $x in (
    for $p at $i in /photons/photon[en >= 0.5]
    group by $key := ($p/phc)[1]/string()
    return
      for tumbling window $w in $p start at $s when true() only end at $e when $e - $s + 1 eq 3
      let $a := avg($w/en)
      let $n := count($w/en)
      return <x at="{ $i[$e] }"><c>{ $w[1]/phc }<a>{ $a }</a><n>{ $n }</n></c></x>
  )
  order by xs:integer($x/@at)
  return $x/*
}</per_channel>
