/*
 * srv_page.h — the embedded web page of flux-server (GET /).
 */
#ifndef FX_SRV_PAGE_H
#define FX_SRV_PAGE_H

extern const char srv_page_html[];

#endif
