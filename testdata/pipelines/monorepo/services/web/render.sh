#!/bin/sh
# render.sh: renders the web page.
. "$(dirname "$0")/../../lib/common.sh"
echo "<h1>$(greeting visitor)</h1>"
