<s>{ for sliding window $w in /photons/photon
       start at $s when ($s - 1) mod 7 eq 0
       only end at $e when $e - $s + 1 eq 3
     let $m := max($w/det_time)
     return <g>{ $m }</g> }</s>
