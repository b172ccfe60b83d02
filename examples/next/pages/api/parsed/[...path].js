// The mistake the Pages helper must catch: the same route without `bodyParser: false`. Next parses
// the body first, so every delivery must get a 500 (retried once fixed), never a 2xx or a 401.
import { casePagesRoute } from '../../../lib/case-routes'

export default casePagesRoute()
