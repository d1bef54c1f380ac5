#ifndef APNSW_COPENSSL_SHIM_H
#define APNSW_COPENSSL_SHIM_H
#include <openssl/ssl.h>
#include <openssl/err.h>
#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/x509.h>
#include <openssl/x509v3.h>
#include <openssl/ec.h>
#include <openssl/ecdsa.h>
#include <openssl/bio.h>
#include <openssl/pkcs12.h>
#include <openssl/decoder.h>
#include <string.h>

// OpenSSL macros do not import into Swift; each one we need is wrapped here.

static inline long apnsw_ssl_ctx_set_min_tls12(SSL_CTX *ctx) {
    return SSL_CTX_set_min_proto_version(ctx, TLS1_2_VERSION);
}
static inline long apnsw_ssl_ctx_set_modes(SSL_CTX *ctx) {
    return SSL_CTX_set_mode(ctx, SSL_MODE_ENABLE_PARTIAL_WRITE | SSL_MODE_ACCEPT_MOVING_WRITE_BUFFER);
}
static inline void apnsw_ssl_ctx_set_read_ahead(SSL_CTX *ctx) { SSL_CTX_set_read_ahead(ctx, 1); }
/// New client sessions go to the context's callback only (`TLSContext`), not to OpenSSL's cache.
static inline long apnsw_ssl_ctx_cache_client_sessions(SSL_CTX *ctx) {
    return SSL_CTX_set_session_cache_mode(ctx, SSL_SESS_CACHE_CLIENT | SSL_SESS_CACHE_NO_INTERNAL_STORE);
}
static inline long apnsw_ssl_ctx_set_options(SSL_CTX *ctx) {
    return SSL_CTX_set_options(ctx, SSL_OP_NO_COMPRESSION | SSL_OP_NO_RENEGOTIATION | SSL_OP_IGNORE_UNEXPECTED_EOF);
}
/// Without this, SNI is never sent.
static inline long apnsw_ssl_set_sni(SSL *ssl, const char *host) {
    return SSL_set_tlsext_host_name(ssl, host);
}
static inline void apnsw_openssl_free(void *p) { OPENSSL_free(p); }
static inline EVP_PKEY *apnsw_ec_p256_generate(void) { return EVP_EC_gen("P-256"); }

/// An EC private key from PEM (PKCS#8 or SEC1), NULL if it is not one. Asking OpenSSL's
/// decoders for EC keys only took about a third off reading a .p8: PEM_read_bio_PrivateKey
/// tries every key type it knows (10 million instructions, a third of the main thread's start).
static inline EVP_PKEY *apnsw_read_ec_private_key_pem(const unsigned char *pem, size_t len) {
    EVP_PKEY *pkey = NULL;
    OSSL_DECODER_CTX *ctx = OSSL_DECODER_CTX_new_for_pkey(&pkey, "PEM", NULL, "EC", EVP_PKEY_KEYPAIR, NULL, NULL);
    if (ctx == NULL) return NULL;
    const unsigned char *p = pem;
    size_t n = len;
    int ok = OSSL_DECODER_from_data(ctx, &p, &n);
    OSSL_DECODER_CTX_free(ctx);
    return ok ? pkey : NULL;
}
/// A fresh RSA key of `bits` (EVP_RSA_gen is a variadic macro).
static inline EVP_PKEY *apnsw_rsa_generate(unsigned int bits) { return EVP_RSA_gen(bits); }
static inline long apnsw_bio_get_mem_data(BIO *b, char **pp) { return BIO_get_mem_data(b, pp); }

/// ALPN selection callback for servers: accept only "h2".
static inline int apnsw_alpn_select_h2(SSL *ssl, const unsigned char **out, unsigned char *outlen,
                                       const unsigned char *in, unsigned int inlen, void *arg) {
    (void)ssl; (void)arg;
    static const unsigned char h2[] = { 2, 'h', '2' };
    unsigned char *sel = NULL;
    if (SSL_select_next_proto(&sel, outlen, h2, sizeof h2, in, inlen) != OPENSSL_NPN_NEGOTIATED)
        return SSL_TLSEXT_ERR_ALERT_FATAL;
    *out = sel;
    return SSL_TLSEXT_ERR_OK;
}
static inline void apnsw_ssl_ctx_use_alpn_h2_server(SSL_CTX *ctx) {
    SSL_CTX_set_alpn_select_cb(ctx, apnsw_alpn_select_h2, NULL);
}
#endif
