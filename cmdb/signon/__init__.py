"""Sign-on backends for the company directory: LDAP / Active Directory (`ldap`, needs the optional python-ldap) and
OpenID Connect (`oidc`). Both hand the user's directory groups to `cmdb.services.directory.directory_grants_apply`.
Their settings come from the environment (gpuops/signon.py)."""
