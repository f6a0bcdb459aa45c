from django.apps import AppConfig


class ConsoleConfig(AppConfig):
    """The ops console: server-rendered pages of the inventory (dashboard, search, object pages, lists).

    Pages read through the apps' selectors (the API's querysets, scopes and filters) and act through their
    services; the console owns no models and nothing imports it.
    """

    name = "console"
    verbose_name = "Ops console"
