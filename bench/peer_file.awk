# The stage rows' peer of rfp-sink: each record of peer_fates.jq into the
# file of its fate, named by -v r= (done), -v t= (retry), -v d= (dead).
{
	if (index($0, "\"fate\":\"done\"")) print > r
	else if (index($0, "\"fate\":\"retry\"")) print > t
	else print > d
}
