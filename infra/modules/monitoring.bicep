// Log Analytics workspace + workspace-based Application Insights, with local (instrumentation
// key) auth disabled; the function app publishes telemetry with its managed identity.
// Checked (search, Azure/bicep-types-az generated docs):
//   Microsoft.OperationalInsights/workspaces@2023-09-01 (properties.sku.name, retentionInDays)
//   Microsoft.Insights/components@2020-02-02 (Application_Type, WorkspaceResourceId,
//     DisableLocalAuth, IngestionMode, read-only ConnectionString)
//   Microsoft.Authorization/roleAssignments@2022-04-01 (principalId, roleDefinitionId, principalType)

import { builtInRoleIds } from 'roles.bicep'

@description('Log Analytics workspace name.')
param workspaceName string

@description('Application Insights component name.')
param appInsightsName string

@description('Azure region.')
param location string

@description('Resource tags.')
param tags object = {}

@description('Days Log Analytics keeps data.')
@minValue(30)
@maxValue(730)
param retentionInDays int = 30

@description('Principal (object) id of the function app identity, granted Monitoring Metrics Publisher.')
param publisherPrincipalId string

resource workspace 'Microsoft.OperationalInsights/workspaces@2023-09-01' = {
  name: workspaceName
  location: location
  tags: tags
  properties: {
    sku: {
      name: 'PerGB2018'
    }
    retentionInDays: retentionInDays
  }
}

resource appInsights 'Microsoft.Insights/components@2020-02-02' = {
  name: appInsightsName
  location: location
  tags: tags
  kind: 'web'
  properties: {
    Application_Type: 'web'
    WorkspaceResourceId: workspace.id
    IngestionMode: 'LogAnalytics'
    DisableLocalAuth: true
  }
}

resource telemetryPublisher 'Microsoft.Authorization/roleAssignments@2022-04-01' = {
  name: guid(appInsights.id, publisherPrincipalId, builtInRoleIds.monitoringMetricsPublisher)
  scope: appInsights
  properties: {
    roleDefinitionId: subscriptionResourceId('Microsoft.Authorization/roleDefinitions', builtInRoleIds.monitoringMetricsPublisher)
    principalId: publisherPrincipalId
    principalType: 'ServicePrincipal'
  }
}

output name string = appInsights.name
// With DisableLocalAuth the connection string only identifies the component; ingestion needs Entra ID.
output connectionString string = appInsights.properties.ConnectionString
