/** Constants shared by the case table and the case apps (no test-runner imports: bundled into runtimes). */
export const CASE_SECRET = 'svc_whsec_Y2FzZS10YWJsZS1zZWNyZXQtZm9yLXRlc3Rz'
export const CASE_MAX_BODY_BYTES = 64 * 1024
export const CASE_PATH = '/webhooks/svc'
export const RUNS_PATH = '/runs'
