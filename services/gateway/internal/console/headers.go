package console

import "net/http"

// ContentSecurityPolicy is sent with every response of the console. Only
// the gateway's own scripts, styles, images and API are reachable; no
// inline script or style, no eval, no plug-ins, no framing, no form posts
// (forms are handled by script), and Trusted Types with no policy, so that
// the app cannot turn a string into markup or code even by mistake (it
// builds the DOM with createElement and textContent only).
const ContentSecurityPolicy = "default-src 'none'; " +
	"script-src 'self'; " +
	"style-src 'self'; " +
	"img-src 'self'; " +
	"connect-src 'self'; " +
	"base-uri 'none'; " +
	"form-action 'none'; " +
	"frame-ancestors 'none'; " +
	"require-trusted-types-for 'script'; " +
	"trusted-types 'none'"

// setSecurityHeaders sets the headers every console response carries.
func setSecurityHeaders(h http.Header) {
	h.Set("Content-Security-Policy", ContentSecurityPolicy)
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("X-Frame-Options", "DENY")
	h.Set("Referrer-Policy", "no-referrer")
	h.Set("Cross-Origin-Opener-Policy", "same-origin")
	h.Set("Cross-Origin-Resource-Policy", "same-origin")
	h.Set("Permissions-Policy", "camera=(), microphone=(), geolocation=(), payment=(), usb=()")
}
